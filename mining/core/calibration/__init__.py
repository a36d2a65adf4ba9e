"""Calibrated confidence for mined pairs (Guo et al. 2018, section 2.4.2) and its evaluation.

Modules: ``base`` (calibrator interface, score feature), ``baselines`` (Platt, isotonic),
``head`` (source-aware scale and bias), ``metrics`` (ECE, Brier, log loss, reliability bins),
``crossval`` (out-of-fold predictions and calibrator comparison), ``estimates`` (Wilson
intervals, thresholds for a target precision, yield, stratum weights, uncertainty sampling),
``hardneg`` (training pairs from reviews).
"""
