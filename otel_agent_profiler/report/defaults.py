"""How much the text report of many traces shows unless told otherwise.

Apart from ``cross_trace``, which draws that report, so that the command line can put them in its
``--help`` without loading the report's code.
"""

#: With more traces than this, the report opens with the cross-trace summary.
MANY_TRACES = 3
#: Traces shown in detail after the summary unless told otherwise (``--top``).
DEFAULT_TOP = 3
#: The default report of many traces is fitted to this many lines (``--max-spans`` not given).
REPORT_MAX_LINES = 400
