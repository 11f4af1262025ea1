"""Runtime: pressure-field contact between assets and rigid meshes (MODEL.md sections 2-4)."""
