//! The language table (`--languages FILE`, languages.yaml): any text is a table
//! or a LanguageConfigError, never a panic; a table answers detection and source
//! checks for any file name. Input: the YAML, then (after a 0xFF byte) a file
//! name to detect.
#![no_main]

use judge_runner::judge::LanguageTable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (yaml, name) = match data.iter().position(|b| *b == 0xff) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &data[..0]),
    };
    let Ok(text) = std::str::from_utf8(yaml) else {
        return;
    };
    let name = String::from_utf8_lossy(name);
    if let Ok(table) = LanguageTable::from_yaml(text) {
        let ids: Vec<&str> = table.ids().collect();
        for id in &ids {
            assert!(table.get(id).is_some(), "listed id {id:?} not found");
        }
        if let Some(lang) = table.detect(&name) {
            assert!(lang.is_source(&name), "detected {name:?} is not a source");
        }
        for lang in table.iter() {
            let _ = lang.compile_limits.effective_wall();
        }
    }
});
