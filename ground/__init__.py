"""The ground floor every stage stands on: storage paths, record IO and sorted runs, the stage life cycle
(manifests, locks, code version), yield floors, progress bars and secret-free logs."""
