"""The ``.tflite`` -> ``.tflite`` compile of an NPU group without TVM (issue 27).

A group of TFLite operators the Ethos-U takes is read straight from the TFLite graph into the
values the TVM path (TVM's importer, Relax partitioning, TE lowering, the part matcher)
hands the planner and the stream generator: the QOps (``operators``), the lowered group
(``lowering``) and its planner graph (``planner_graph``); ``group`` plans it and writes its
stream with the same functions as the TVM path. A group with an operator or a form this
reader does not know goes through TVM instead, so the two paths write the same bytes.
"""
