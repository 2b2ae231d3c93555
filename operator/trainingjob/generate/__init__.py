"""Generators of checked-in files: the CRDs (crds/) and the chart's operator settings schema."""
