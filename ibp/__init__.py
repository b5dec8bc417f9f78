"""ibp package."""
