//! MLIR textual pass pipelines (`builtin.module(a,func.func(b{x=1}),c)`), as the stand-in
//! air-opt checks them.

/// One pipeline element: a pass with options, or an op anchor with a nested pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    pub name: String,
    /// The text inside `{…}`.
    pub options: String,
    /// Set for op anchors (`func.func(...)`).
    pub nested: Option<Vec<Element>>,
    /// 1-based column of the name in the pipeline text.
    pub column: usize,
}

/// Parses a pipeline; errors use MLIR's "MLIR Textual PassPipeline Parser" form.
pub fn parse(text: &str) -> Result<Vec<Element>, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let list = p.list()?;
    p.skip_ws();
    if p.i != p.s.len() {
        return Err(p.error("expected end of pipeline"));
    }
    Ok(list)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> String {
        format!(
            "MLIR Textual PassPipeline Parser:1:{}: error: {what}",
            self.i + 1
        )
    }

    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn list(&mut self) -> Result<Vec<Element>, String> {
        let mut out = vec![self.element()?];
        loop {
            self.skip_ws();
            if self.s.get(self.i) == Some(&b',') {
                self.i += 1;
                out.push(self.element()?);
            } else {
                return Ok(out);
            }
        }
    }

    fn element(&mut self) -> Result<Element, String> {
        self.skip_ws();
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric() || b"-_.".contains(&self.s[self.i]))
        {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.error("expected pass or op name"));
        }
        let name = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        let mut options = String::new();
        if self.s.get(self.i) == Some(&b'{') {
            let open = self.i;
            let mut depth = 0;
            loop {
                match self.s.get(self.i) {
                    None => {
                        self.i = open;
                        return Err(self.error("unbalanced '{' in pass options"));
                    }
                    Some(b'{') => depth += 1,
                    Some(b'}') => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                self.i += 1;
            }
            options = String::from_utf8_lossy(&self.s[open + 1..self.i]).into_owned();
            self.i += 1;
        }
        let mut nested = None;
        if self.s.get(self.i) == Some(&b'(') {
            self.i += 1;
            nested = Some(self.list()?);
            self.skip_ws();
            if self.s.get(self.i) != Some(&b')') {
                return Err(self.error("expected ')' to end the nested pipeline"));
            }
            self.i += 1;
        }
        Ok(Element {
            name,
            options,
            nested,
            column: start + 1,
        })
    }
}

/// `key=value key2=v1,v2` → pairs (values may hold commas; keys are separated by spaces).
pub fn options(text: &str) -> Vec<(String, String)> {
    text.split_whitespace()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (kv.to_owned(), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_pipelines_parse() {
        let p = parse(
            "builtin.module(func.func(air-wrap-func-with-parallel{loop-bounds=4,2,1 actual-sizes=5,6,1}),\
             air-par-to-launch{depth=0 has-air-segment=true},canonicalize,cse,air-copy-to-dma)",
        )
        .unwrap();
        assert_eq!(p.len(), 1);
        let inner = p[0].nested.as_ref().unwrap();
        let names: Vec<&str> = inner.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "func.func",
                "air-par-to-launch",
                "canonicalize",
                "cse",
                "air-copy-to-dma"
            ]
        );
        let wrap = &inner[0].nested.as_ref().unwrap()[0];
        assert_eq!(
            options(&wrap.options),
            [
                ("loop-bounds".into(), "4,2,1".into()),
                ("actual-sizes".into(), "5,6,1".into())
            ]
        );
        assert!(
            parse("builtin.module(cse")
                .unwrap_err()
                .contains("expected ')'")
        );
        assert!(parse("a{b").unwrap_err().contains("unbalanced"));
    }
}
