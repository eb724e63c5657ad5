"""The input sizes at which the offline engine changes how it works.

Apart from the modules that act on them (``shards``, ``workers``), so that the command line can
give them in its ``--help`` without loading those.
"""

#: JSON Lines inputs larger than this in all are profiled on disk unless told otherwise: in memory
#: they would take about seven times their size.
ON_DISK_BYTES = 256 * 2**20
#: Below this many spans starting processes costs more than it saves.
MIN_SPANS_FOR_WORKERS = 20_000
#: The most workers chosen without being asked: more rarely pay for their memory.
MAX_AUTO_WORKERS = 8
