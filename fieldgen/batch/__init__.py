"""`fieldgen batch`: build every asset of a manifest, skipping those already current.

manifest (the items to build) -> cache (which are current) -> executors + worker (build the
others, each in a process of its own) -> report (JSON, JUnit); run ties them together.
"""
