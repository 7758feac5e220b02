//! Client tests.
