//! The benchmark-server (MZBench) API. (Filled in by the bench module work.)
