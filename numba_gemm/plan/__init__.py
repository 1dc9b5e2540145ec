"""Which kernel runs a product, decided once per shape: the operands' geometry and alignment
(``geometry``), the cost model (``cost``), the committed tuning data (``tuning``), the choice
(``choose.plan_for`` -> ``Plan``) and aligned staging of unaligned rows (``staging``)."""
