"""Tangential compliance of a material: the friction spring's defaults (D 6.2.3).

The spring's stiffness is k = K̄·p and its damping c = C̄·p (docs/tangential.md); an asset records
K̄ and C̄ when the build was given either, and the runtime falls back on these for one that does not.
"""

#: With these a point slides after a stretch μ/K̄ (50 µm at μ = 0.5), and the spring's time
#: constant is C̄/K̄ = 1 ms.
DEFAULT_TANGENTIAL_STIFFNESS = 1.0e4      # K̄, 1/m
DEFAULT_TANGENTIAL_DAMPING = 10.0         # C̄, s/m
