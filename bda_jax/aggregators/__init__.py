"""Council aggregators with one interface, the evaluation harness and model files.

Estimators (``fit`` -> self, ``predict_proba`` [T, K] over each task's candidates, 0 on padding;
``predict`` [T] with seeded random ties; fitted attributes end in ``_``): ``Majority``, ``BDA``
and its arms ``BDAShared``, ``BDAPerAgent``, ``BDATempered``, ``BDAConfusion`` ([BDA] §3-§5),
``BDAAuto`` (the arm chosen among them by inner-CV Brier; ``AUTO_VARIANTS``, ``auto_scores``),
the baselines ``LogisticStacking``, ``GatedVote``, ``BestMember``, ``VerbalizedVote``,
``CouncilDawidSkene`` (the ``ds-em`` arm) and the recalibration wrappers
``IsotonicRecalibrated`` and ``TemperatureScaled`` ([BDA] Appendix B.1, E.1); ``Aggregator`` is
their base class.

Harness ([BDA] §5, Appendix D.1-D.2): ``ARMS``, ``make_arm``, ``is_supervised``, ``evaluate``
(``Evaluation``), ``fold_weights``, ``fitted_hyperparameters``, ``decision_flips``,
``reliability_ablation``, and the "follows one seat" diagnostic ``follows_one_seat``
(``SeatFollowing``; [BDA] Appendix F.10). Model files (JSON + ``.npz``, schema-versioned, no
pickle): ``save_model``, ``load_model``, ``ModelArtifact``, ``model_state``, ``fingerprint_counts``,
``check_agents``; ``fit_model_file`` and ``predict_tasks`` (the library side of ``bda fit``
and ``bda predict``). Functional pieces of the baselines: ``round0_accuracy`` (``SeatAccuracy``),
``stacking_features``, ``pav``, ``isotonic_regression``, ``fit_posterior_temperature``.
"""
from ._artifacts import (MODEL_INLINE_LIMIT, MODEL_KIND, MODEL_SCHEMA_VERSION, ModelArtifact, check_agents, fingerprint_counts, load_model, model_state,
                         save_model)
from ._base import Aggregator
from ._baselines import (BestMember, GatedVote, IsotonicRecalibrated, LogisticStacking,
                         SeatAccuracy, TemperatureScaled, VerbalizedVote,
                         fit_posterior_temperature, isotonic_regression, pav, round0_accuracy,
                         stacking_features)
from ._bda import (AUTO_VARIANTS, BDA, BDAAuto, BDAConfusion, BDAPerAgent, BDAShared,
                   BDATempered, Majority, auto_scores)
from ._dawid_skene import CouncilDawidSkene
from ._model_files import fit_model_file, predict_tasks
from ._evaluation import (ARMS, Evaluation, SeatFollowing, decision_flips, evaluate,
                          fitted_hyperparameters, fold_weights, follows_one_seat, is_supervised,
                          make_arm, reliability_ablation)

__all__ = [
    "AUTO_VARIANTS", "Aggregator", "BDA", "BDAAuto", "BDAConfusion", "BDAPerAgent", "BDAShared",
    "BDATempered", "BestMember",
    "CouncilDawidSkene", "GatedVote", "IsotonicRecalibrated", "LogisticStacking", "Majority",
    "TemperatureScaled", "VerbalizedVote",
    "ARMS", "Evaluation", "SeatFollowing", "decision_flips", "evaluate", "fitted_hyperparameters",
    "fold_weights", "follows_one_seat", "is_supervised", "make_arm", "reliability_ablation",
    "MODEL_INLINE_LIMIT", "MODEL_KIND", "MODEL_SCHEMA_VERSION", "ModelArtifact", "check_agents",
    "fingerprint_counts", "fit_model_file", "load_model", "model_state", "predict_tasks",
    "save_model",
    "SeatAccuracy", "auto_scores", "fit_posterior_temperature", "isotonic_regression", "pav",
    "round0_accuracy", "stacking_features",
]
