"""The parts of the joblib backend (`dista_runtime.joblib`): what a worker runs (`batch`) and
how the driver ships batches and collects their results (`jobs`)."""
