"""Deep-learning workloads: gradient traces of real models and their fusion into allreduce
calls (``traces``, ``fusion``), and distributed SGD trained for real over mpi4py (``sgd``).
Building traces and training need the ``[dnn]`` extra (PyTorch); replaying a committed trace
does not."""
