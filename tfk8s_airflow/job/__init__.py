"""The job model: pure, so the CLI, the operators and the tests all build and judge a job the same way.

No Airflow and no Kubernetes client in this package. Its folder shows its layers, each importing
only the ones below it (``.importlinter``, docs/architecture.md):

- ``run``: a job once it runs: the record that travels in XCom, the judge, the verdict, the
  recovery planner, resolving what an operator was given;
- ``builders``: from a spec to the Kubernetes objects of one job (pods, Service, ConfigMap,
  NetworkPolicy, TensorBoard, evaluation), the one pod admission, quota, rendering;
- ``policy``: what the deployment decides for every job (``[tfk8s]``), confinement, the pre-flight
  verdict;
- ``spec``: the spec model and its parser (native documents and Kubeflow TFJob manifests);
- the floor, the modules at this level: ``defaults``, ``states``, ``naming``, ``kueue``: the
  vocabulary every layer shares, importing no other module of the job model.
"""
