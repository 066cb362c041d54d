//! Problem packages: fetch (SHA-256 checked while streaming), unpack safely and
//! atomically into the shared cache, parse the Kattis/ICPC format into a `Problem`.
