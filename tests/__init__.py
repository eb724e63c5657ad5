"""The test suite; its folders mirror the package (see conftest.py for the import mode)."""
