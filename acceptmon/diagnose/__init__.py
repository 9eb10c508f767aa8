"""``acceptmon doctor``: known speculative-decoding failure patterns, recognised from logs.

``model`` (rules and findings), ``state`` (what a run's records add up to), ``signatures``
(the detector types rules are built from), ``breakeven`` (does speculation pay) and ``engine``
(the incremental rule engine) are pure; ``rules`` reads rule files, ``report`` renders,
``read`` feeds files through the batch pipeline.
"""
