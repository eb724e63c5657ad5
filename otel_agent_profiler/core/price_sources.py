"""When and where the built-in list prices (``pricing.BUILT_IN_PRICES``) were checked.

Apart from the price table, so that a command's ``--help`` can give the date without loading it.
"""

#: When :data:`pricing.BUILT_IN_PRICES` was last checked against the providers' public pricing pages.
BUILT_IN_PRICES_AS_OF = "2026-11-24"
#: Where :data:`pricing.BUILT_IN_PRICES` come from.
BUILT_IN_PRICES_SOURCES = (
    "https://platform.openai.com/docs/pricing",
    "https://platform.claude.com/docs/en/about-claude/pricing",
)
