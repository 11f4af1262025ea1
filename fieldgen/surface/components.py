"""Connected components, the one implementation for the whole tree (of any graph given by its
edges, of a triangle set's vertices and faces), and what needs them on a surface: consistent
winding and the vertices where separate sheets touch (docs/model.md §2.2)."""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from fieldgen.surface.topology import edge_table, face_pairs_across_edges, triangle_edges


def components(n: int, pairs: np.ndarray) -> tuple[int, np.ndarray]:
    """Connected components of ``n`` nodes joined by the edges ``pairs`` (k, 2): their number and
    each node's label, numbered in the order of each component's lowest node."""
    pairs = np.asarray(pairs).reshape(-1, 2)
    # scipy indexes a graph this size with int32 anyway: converting first saves a copy of each column.
    pairs = pairs.astype(np.int32 if n < 2**31 else np.int64, copy=False)
    graph = sparse.coo_matrix((np.ones(len(pairs), dtype=np.int8), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    count, labels = csgraph.connected_components(graph.tocsr(), directed=False)
    return int(count), labels


def vertex_pieces(n: int, faces: np.ndarray) -> np.ndarray:
    """Each of the ``n`` vertices' connected piece of ``faces`` (joined through shared vertices)."""
    return components(n, triangle_edges(np.asarray(faces)))[1]


def face_pieces(faces: np.ndarray, n_vertices: int) -> list[np.ndarray]:
    """Face index arrays of the pieces of a triangle set joined through shared vertices, in the
    order of each piece's lowest vertex."""
    face_label = vertex_pieces(n_vertices, faces)[faces[:, 0]]
    return [np.flatnonzero(face_label == lab) for lab in np.unique(face_label)]


def face_components(faces: np.ndarray) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pieces of ``faces`` joined across edges used by two faces: ``(count, labels, f, g, same)``
    with the face pairs of :func:`face_pairs_across_edges`."""
    f, g, same = face_pairs_across_edges(faces)
    count, labels = components(len(faces), np.stack([f, g], axis=1))
    return count, labels, f, g, same


def consistent_flips(n_faces: int, f, g, same) -> tuple[np.ndarray, int]:
    """Per-face flip making every two-face edge run opposite ways in its two faces.

    Breadth-first over the face graph from the lowest face of each component. Returns
    the flips and the number of edges that still disagree (non-orientable pieces).
    """
    weight = np.where(same, 2.0, 1.0)  # 2: the faces disagree, 1: they agree
    graph = sparse.coo_matrix((np.r_[weight, weight], (np.r_[f, g], np.r_[g, f])),
                              shape=(n_faces, n_faces)).tocsr()
    _, labels = components(n_faces, np.stack([f, g], axis=1))
    pair_keys = np.minimum(f, g) * n_faces + np.maximum(f, g)
    order_keys = np.argsort(pair_keys, kind="stable")
    pair_keys, pair_same = pair_keys[order_keys], same[order_keys]
    flip = np.zeros(n_faces, dtype=bool)
    for root in np.unique(labels, return_index=True)[1]:
        order, pred = csgraph.breadth_first_order(graph, int(root), directed=False,
                                                  return_predecessors=True)
        child = order[1:]
        disagree = _lookup_pairs(pair_keys, pair_same, pred[child], child, n_faces)
        for node, parent, swap in zip(child.tolist(), pred[child].tolist(), disagree.tolist()):
            flip[node] = flip[parent] ^ swap
    conflicts = int(np.count_nonzero(same ^ (flip[f] ^ flip[g])))
    return flip, conflicts


def _lookup_pairs(keys, values, a, b, n):
    """values[k] for the sorted pair keys of faces (a, b)."""
    k = np.minimum(a, b).astype(np.int64) * n + np.maximum(a, b)
    return values[np.searchsorted(keys, k)]


def nonmanifold_vertices(faces: np.ndarray) -> int:
    """Vertices whose faces form more than one fan (sheets touching at a point)."""
    if len(faces) == 0:
        return 0
    m = len(faces)
    corner = np.arange(3 * m).reshape(m, 3)  # corner (face, local vertex)
    _, edge_id, face_of_edge, _, counts = edge_table(faces)
    # Directed edge k of face f runs from local vertex k to local vertex (k+1)%3.
    local = np.tile([0, 1, 2], m)
    two = counts[edge_id] == 2
    idx = np.flatnonzero(two)
    order = idx[np.argsort(edge_id[idx], kind="stable")].reshape(-1, 2)
    fa, fb = face_of_edge[order[:, 0]], face_of_edge[order[:, 1]]
    ka = local[order[:, 0]]
    va0, va1 = faces[fa, ka], faces[fa, (ka + 1) % 3]
    # Corner of face fb at the same vertex: find the local index whose vertex matches.
    rows_b = faces[fb]
    kb0 = np.argmax(rows_b == va0[:, None], axis=1)
    kb1 = np.argmax(rows_b == va1[:, None], axis=1)
    src = np.r_[corner[fa, ka], corner[fa, (ka + 1) % 3]]
    dst = np.r_[corner[fb, kb0], corner[fb, kb1]]
    _, label = components(3 * m, np.stack([src, dst], axis=1))
    vertex = faces.reshape(-1)
    pairs = np.unique(np.stack([vertex, label], axis=1), axis=0)
    fans = np.bincount(pairs[:, 0])
    return int(np.count_nonzero(fans > 1))
