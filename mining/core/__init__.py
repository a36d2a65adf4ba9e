"""Pure numeric core of pcapp: encoders, kNN, margin scoring, matching, alignment, calibration.

Nothing in this package imports Django, Celery or the web apps; callers load data and
models, call these functions on arrays, and save the results.
"""
