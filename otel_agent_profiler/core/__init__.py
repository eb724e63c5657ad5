"""The analysis core: span records in, trace profiles out.

Pure Python with no OpenTelemetry imports, so the live processor, the offline CLI and the
profiling service all feed it the same ``SpanRecord`` objects and get the same answers.
"""

from typing import TYPE_CHECKING

from .lazy_exports import exported_names as _exported_names, lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .analyze import Classifier as Classifier, profile_records as profile_records, profile_trace as profile_trace
    from .categories import (
        CATEGORIES as CATEGORIES,
        CATEGORY_OVERRIDE_ATTRIBUTE as CATEGORY_OVERRIDE_ATTRIBUTE,
        classify as classify,
    )
    from .findings import Finding as Finding, FindingOptions as FindingOptions, find_all as find_all, what_if as what_if
    from .genai import TokenUsage as TokenUsage
    from .pricing import ModelPrice as ModelPrice, PriceTable as PriceTable
    from .profile import (
        Anomaly as Anomaly,
        CategoryStats as CategoryStats,
        OperationStats as OperationStats,
        SpanProfile as SpanProfile,
        TraceProfile as TraceProfile,
    )
    from .projection import projected_duration_ns as projected_duration_ns
    from .records import (
        AttributeValue as AttributeValue,
        SpanEvent as SpanEvent,
        SpanKind as SpanKind,
        SpanLink as SpanLink,
        SpanRecord as SpanRecord,
        StatusCode as StatusCode,
    )
    from .schema import profiles_to_dict as profiles_to_dict, trace_to_dict as trace_to_dict

# Each name is imported from its module on first use: importing one module of the
# core (the command line's `--help` reads the price table's date) loads that module, not all of them.
_EXPORTED_FROM = {
    "analyze": ("Classifier", "profile_records", "profile_trace"),
    "categories": ("CATEGORIES", "CATEGORY_OVERRIDE_ATTRIBUTE", "classify"),
    "findings": ("Finding", "FindingOptions", "find_all", "what_if"),
    "genai": ("TokenUsage",),
    "pricing": ("ModelPrice", "PriceTable"),
    "profile": ("Anomaly", "CategoryStats", "OperationStats", "SpanProfile", "TraceProfile"),
    "projection": ("projected_duration_ns",),
    "records": ("AttributeValue", "SpanEvent", "SpanKind", "SpanLink", "SpanRecord", "StatusCode"),
    "schema": ("profiles_to_dict", "trace_to_dict"),
}


__getattr__, __dir__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())


__all__ = _exported_names(_EXPORTED_FROM)
