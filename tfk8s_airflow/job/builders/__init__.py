"""From a spec to the Kubernetes objects of one job: ``objects`` (pods, Service, ConfigMap),
``wiring`` (TF_CONFIG and flags), ``shardmap``, ``tensorboard``, ``network`` (the NetworkPolicy),
``templatemap`` (the pods kept for recovery), ``plan`` (every object of a job, in creation order:
what setup creates and ``tfk8s render`` prints), ``evaluation``, ``render`` (the plan as YAML, or
through a Jinja2 template), ``admission`` (the one admission of a pod), ``quota`` and ``ownership``.
"""
