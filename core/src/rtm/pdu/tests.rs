//! PDU encode/decode tests.
