"""The TetGen child process (``python -m fieldgen.meshing.tetgen_child FOLDER``).

A module of its own so that each child imports only numpy and TetGen, not the meshing code
that starts it (whose surface checks bring in scipy): every mesh of the sizing loops starts one.
The parent side is :func:`fieldgen.meshing.tetgen.tetrahedralize`.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import tetgen

from fieldgen.meshing.process import die_with_starter


def tetgen_worker(folder: str) -> None:
    """Child-process side: read ``input.npz`` in ``folder``, run TetGen there, write ``output.npz``.

    TetGen runs in its own process because a refused surface can corrupt its heap (it can abort
    at exit after refusing a self-intersection), some inputs make it hang, and it prints to
    stdout and writes ``tetgen-tmpfile_skipped.*`` into the current directory.
    """
    die_with_starter()                # killed with the build that started it
    data = np.load(os.path.join(folder, "input.npz"))
    generator = tetgen.TetGen(data["vertices"], data["faces"].astype(np.int32), data["markers"].astype(np.int32))
    for point in data["holes"]:
        generator.add_hole([float(x) for x in point])
    switches = str(data["switches"])
    if "background_sizes" in data.files:
        # A size field (target edge length at the vertices of a background tet mesh, TetGen's -m).
        generator._tetgen.load_bgmesh_from_arrays(
            np.ascontiguousarray(data["background_points"], dtype=np.float64),
            np.ascontiguousarray(data["background_tets"], dtype=np.int32),
            np.ascontiguousarray(data["background_sizes"], dtype=np.float64))
        switches = switches[:-1] + "mQ" if switches.endswith("Q") else switches + "m"
    try:
        generator.tetrahedralize(switches=switches)
    except RuntimeError as error:
        with open(os.path.join(folder, "error.txt"), "w") as handle:
            handle.write(str(error))
        return
    np.savez(os.path.join(folder, "output.npz"), nodes=generator.node, elements=generator.elem,
             trifaces=generator.trifaces, trimarkers=generator.triface_markers)


if __name__ == "__main__":
    tetgen_worker(sys.argv[1])
