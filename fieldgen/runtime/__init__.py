"""Runtime: pressure-field contact between assets and rigid meshes (docs/model.md §3-5)."""
