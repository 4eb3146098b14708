"""What the Ethos NPUs and their operators are, for every layer of the project: which
configurations exist and what each one is (``accelerators``: its MACs, its internal buffer,
the system Vela assumes around it) and the operator vocabulary (``ops``).

The planner, the functional model of the command stream (``ethosu_stream``), the compiler and
the command line all read the same tables from here. The package is TVM-free and
dependency-free: it imports neither TVM nor any other part of the project.
"""
