"""The one exception type the planner raises for bad input or an impossible request."""


class PlannerError(ValueError):
    """Raised for an invalid graph, a bad option, or a budget no Proposal fits.

    A ValueError subclass so callers that validate inputs generically still catch it.
    """
