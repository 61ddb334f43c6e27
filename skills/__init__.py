"""Pure transformations: trajectories -> skill samples, prompt rendering, decontamination."""
