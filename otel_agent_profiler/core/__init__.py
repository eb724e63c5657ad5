"""The analysis core: span records in, trace profiles out.

Pure Python with no OpenTelemetry imports, so the live processor, the offline CLI and the
profiling service all feed it the same ``SpanRecord`` objects and get the same answers.
"""

from typing import TYPE_CHECKING

from .lazy_exports import lazy_attributes as _lazy_attributes

if TYPE_CHECKING:
    from .analyze import Classifier, profile_records, profile_trace
    from .categories import CATEGORIES, CATEGORY_OVERRIDE_ATTRIBUTE, classify
    from .findings import Finding, FindingOptions, find_all, what_if
    from .genai import TokenUsage
    from .pricing import ModelPrice, PriceTable
    from .profile import Anomaly, CategoryStats, OperationStats, SpanProfile, TraceProfile
    from .projection import projected_duration_ns
    from .records import AttributeValue, SpanEvent, SpanKind, SpanLink, SpanRecord, StatusCode
    from .schema import profiles_to_dict, trace_to_dict

# Each name is imported from its module on first use: importing one module of the
# core (the command line's `--help` reads the price table's date) loads that module, not all of them.
_EXPORTED_FROM = {
    "Classifier": "analyze",
    "profile_records": "analyze",
    "profile_trace": "analyze",
    "CATEGORIES": "categories",
    "CATEGORY_OVERRIDE_ATTRIBUTE": "categories",
    "classify": "categories",
    "Finding": "findings",
    "FindingOptions": "findings",
    "find_all": "findings",
    "what_if": "findings",
    "TokenUsage": "genai",
    "ModelPrice": "pricing",
    "PriceTable": "pricing",
    "Anomaly": "profile",
    "CategoryStats": "profile",
    "OperationStats": "profile",
    "SpanProfile": "profile",
    "TraceProfile": "profile",
    "projected_duration_ns": "projection",
    "AttributeValue": "records",
    "SpanEvent": "records",
    "SpanKind": "records",
    "SpanLink": "records",
    "SpanRecord": "records",
    "StatusCode": "records",
    "profiles_to_dict": "schema",
    "trace_to_dict": "schema",
}


__getattr__, __dir__ = _lazy_attributes(__name__, _EXPORTED_FROM, globals())


__all__ = [
    "CATEGORIES",
    "CATEGORY_OVERRIDE_ATTRIBUTE",
    "Anomaly",
    "AttributeValue",
    "CategoryStats",
    "Classifier",
    "Finding",
    "FindingOptions",
    "ModelPrice",
    "OperationStats",
    "PriceTable",
    "SpanEvent",
    "SpanKind",
    "SpanLink",
    "SpanProfile",
    "SpanRecord",
    "StatusCode",
    "TokenUsage",
    "TraceProfile",
    "classify",
    "find_all",
    "profile_records",
    "profile_trace",
    "profiles_to_dict",
    "projected_duration_ns",
    "trace_to_dict",
    "what_if",
]
