"""``ember.prune``: magnitude and structured pruning with masks that survive training
(the reparametrisation of ``torch.nn.utils.prune``), made permanent with :func:`remove`,
made smaller with :func:`shrink`, reported with :func:`sparsity_report`, and applied
gradually while a Trainer fine-tunes with :class:`PruningCallback`.

>>> net = ember.nn.Sequential(ember.nn.Linear(64, 128), ember.nn.ReLU(), ember.nn.Linear(128, 10))
>>> ember.prune.global_unstructured(ember.prune.prunable_parameters(net), amount=0.8)
>>> round(ember.prune.sparsity_report(net).total["sparsity"], 2)
0.8
"""
from .callback import PruningCallback, current_sparsity
from .methods import (custom_from_mask, global_unstructured, identity, is_pruned,
                      l1_unstructured, ln_structured, prunable_parameters, pruned_parameters,
                      remove)
from .report import SparsityReport, sparsity_report
from .shrink import prune_attention_heads, shrink

compact = shrink

__all__ = ["l1_unstructured", "global_unstructured", "ln_structured", "custom_from_mask",
           "identity", "remove", "is_pruned", "pruned_parameters", "prunable_parameters",
           "sparsity_report", "SparsityReport", "shrink", "compact", "prune_attention_heads",
           "PruningCallback", "current_sparsity"]
