//! The scopes the console checks (CONTRACT §7 "Tokens").

pub const CONSOLE_READ: &str = "console:read";
pub const PROBLEMS_WRITE: &str = "problems:write";
pub const SUBMISSIONS_WRITE: &str = "submissions:write";
