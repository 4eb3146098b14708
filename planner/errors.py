"""The one exception type the planner raises for bad input or an impossible request, and the
two kinds of it the TFLite front door (:mod:`planner.tflite_check`) raises."""


class PlannerError(ValueError):
    """Raised for an invalid graph, a bad option, or a budget no Proposal fits.

    A ValueError subclass so callers that validate inputs generically still catch it.
    """


class InvalidModelError(PlannerError):
    """The model file cannot be read: truncated, corrupt, or content no TFLite runtime takes
    (``tvm_ethos`` raises it as its ModelLoadError)."""


class UnimportableModelError(PlannerError):
    """The file is a readable model whose content contradicts the schema or itself, or that
    tvm-ethos cannot import (``tvm_ethos`` raises it as its UnsupportedModelError)."""
