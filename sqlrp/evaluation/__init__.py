"""Evaluation of projections: NumPy metrics (:mod:`.metrics`) and the same metrics as SQL run inside
the database on a seeded sample (:mod:`.sql`)."""

from .metrics import (
    Kernel,
    auc_rnx,
    distortion_summary,
    feature_sq_distances,
    kernel_nrmse,
    knn_indices,
    linear_classifier_accuracy,
    mean_distortion,
    pairwise_distortion,
    q_nx,
    r_nx,
    recall_at_k,
)
from .sql import distortion_query, fetch_sample, recall_query, sample_ids, sql_distortion, sql_recall_at_k

__all__ = [
    "Kernel",
    "auc_rnx",
    "distortion_query",
    "distortion_summary",
    "feature_sq_distances",
    "fetch_sample",
    "kernel_nrmse",
    "knn_indices",
    "linear_classifier_accuracy",
    "mean_distortion",
    "pairwise_distortion",
    "q_nx",
    "r_nx",
    "recall_at_k",
    "recall_query",
    "sample_ids",
    "sql_distortion",
    "sql_recall_at_k",
]
