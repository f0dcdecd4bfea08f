"""The estimator: workload and model shape in, memory, speed, time and host needs out.

Each module holds one layer: ``workload`` and ``shapes`` describe the job, ``gpus`` the card,
``memory``, ``throughput`` and ``host`` predict, ``calibration`` keeps the fitted constants, and
``estimate`` puts them together. Nothing here knows about prices.
"""
