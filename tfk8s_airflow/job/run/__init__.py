"""A job once it runs: ``judge`` (its state from its pods), ``observe`` (one LIST judged),
``verdict`` (kept on the job's Service), ``recovery`` (the planner), ``recovery_policy``,
``recoverystate`` (read back, bounded), ``records`` (typed records that cross task boundaries) and
``resolve`` (the spec an operator was given, and the job record).
"""
