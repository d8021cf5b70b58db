"""The registry: tasks.yaml, registry/licenses.yaml, registry/models.yaml, the weights specs under
registry/weights/ and the measurement protocols under registry/protocols/, loaded and validated.

Every problem is a :class:`evaluator.errors.RegistryError` that names the file, the entry and what
is accepted. The loaders are pure: they read files under a root directory and return frozen
dataclasses. One module per job: ``files`` (reading and hashing the files), ``tasks`` (the task
types and names), ``tasks_yaml`` (reading tasks.yaml), ``licenses``, ``models``, ``weights``,
``protocols``, and ``load`` (the whole :class:`~evaluator.data.registry.load.Registry`,
``load_registry``).
"""
