"""The compile pipeline, its stages in order: partition -> plan -> schedule -> NPU codegen and
command streams -> network build -> report, each stage's result a typed value."""
