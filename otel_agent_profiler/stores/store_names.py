"""The trace stores that can be read, and how much a search fetches unless told otherwise.

Apart from ``query``, so that the command line can give them in its ``--help`` without loading it.
"""

JAEGER = "jaeger"
TEMPO = "tempo"
PHOENIX = "phoenix"
#: The stores that can be read, in the order the help lists them.
STORES = (JAEGER, TEMPO, PHOENIX)

#: Traces fetched by a search when no limit is given.
DEFAULT_LIMIT = 100
