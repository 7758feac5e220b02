//! API errors and their mapping to status codes and `reason_code`s, as the real server
//! maps them.

use super::json::Json;

/// An error reply: `{"reason":…,"reason_code":…}` with its HTTP status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) status: u16,
    pub(crate) code: &'static str,
    pub(crate) reason: String,
}

impl ApiError {
    /// 404 `not_found`.
    pub(crate) fn not_found(reason: impl Into<String>) -> ApiError {
        ApiError {
            status: 404,
            code: "not_found",
            reason: reason.into(),
        }
    }

    /// 404 for a benchmark id.
    pub(crate) fn no_bench(id: i64) -> ApiError {
        ApiError::not_found(format!("Benchmark {id} is not found"))
    }

    /// 400 `badarg`.
    pub(crate) fn badarg(reason: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            code: "badarg",
            reason: reason.into(),
        }
    }

    /// 400 `not_running`.
    pub(crate) fn not_running() -> ApiError {
        ApiError {
            status: 400,
            code: "not_running",
            reason: "Benchmark is not running yet".to_owned(),
        }
    }

    /// 403 `forbidden`.
    pub(crate) fn forbidden() -> ApiError {
        ApiError {
            status: 403,
            code: "forbidden",
            reason: "Operation is forbidden".to_owned(),
        }
    }

    /// 500 `internal_error`, for everything that crashes the real handler. The real
    /// text also dumps the whole request record; a short stand-in keeps the shape.
    pub(crate) fn internal(term: &str) -> ApiError {
        ApiError {
            status: 500,
            code: "internal_error",
            reason: format!(
                "Server Internal Error: {term}\n\nReq: {{http_req,...}}\n\nStacktrace: []"
            ),
        }
    }

    /// 503 `service_unavailable`.
    pub(crate) fn unavailable() -> ApiError {
        ApiError {
            status: 503,
            code: "service_unavailable",
            reason: "Server is going to shutdown".to_owned(),
        }
    }

    /// The JSON body.
    pub(crate) fn body(&self) -> Json {
        Json::obj([
            ("reason", Json::str(self.reason.clone())),
            ("reason_code", Json::str(self.code)),
        ])
    }
}
