"""Mesh size from a stated accuracy (docs/model.md §2.10): the meshers (``mesher``), the sizing
passes (``accuracy``; the layer band's in ``band``), a skin's size fields (``size_field``), plates
(``plate``) and the warning when the accuracy is not met (``warning``)."""
