//! benchlink-std: blocking clients over `std::net`, the CLI, and local servers.
