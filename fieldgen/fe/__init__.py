"""The finite-element extent field (docs/model.md §2.2, §2.10): the P1 solve (``extent``), the red
refinement (``refinement``) and the two-mesh error estimate (``estimate``)."""
