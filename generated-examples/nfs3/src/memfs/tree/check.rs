//! The node table's invariants, for tests.

use std::collections::HashMap;

use super::{Kind, Tree, ROOT};
use crate::nfs3::Fileid3;

impl Tree {
    /// Checks the table's invariants: every entry names a node, a directory's nlink and
    /// parent agree with its entries, a file's links with the names it has, each file's pages
    /// with its size, the byte count with what is stored, and both bounds hold.
    pub fn check(&self) -> Result<(), String> {
        let mut names: HashMap<Fileid3, u32> = HashMap::new();
        for (id, node) in &self.nodes {
            let Kind::Dir(dir) = &node.kind else { continue };
            let mut subdirs = 0;
            for (_, entry) in dir.after(0) {
                let child = self
                    .nodes
                    .get(&entry.fileid)
                    .ok_or(format!("{id}: dangling entry"))?;
                *names.entry(entry.fileid).or_default() += 1;
                if let Kind::Dir(sub) = &child.kind {
                    subdirs += 1;
                    if sub.parent != *id {
                        return Err(format!("{}: parent {} not {id}", entry.fileid, sub.parent));
                    }
                }
                if !dir.by_name.contains_key(&entry.name) {
                    return Err(format!("{id}: entry without a name index"));
                }
            }
            if subdirs != dir.subdirs || dir.by_name.len() != dir.by_cookie.len() {
                return Err(format!(
                    "{id}: {subdirs} subdirectories, {} counted",
                    dir.subdirs
                ));
            }
        }
        let mut bytes = 0;
        for (id, node) in &self.nodes {
            let named = names.get(id).copied().unwrap_or(0);
            match &node.kind {
                Kind::Dir(_) if *id != ROOT && named != 1 => {
                    return Err(format!("directory {id} has {named} names"))
                }
                Kind::Dir(_) => {}
                _ if named != node.links || named == 0 => {
                    return Err(format!("{id}: {named} names, {} links", node.links))
                }
                Kind::File { data, .. } => {
                    data.check().map_err(|e| format!("{id}: {e}"))?;
                    bytes += node.kind.stored();
                }
                _ => bytes += node.kind.stored(),
            }
        }
        if bytes != self.used_bytes || bytes > self.bounds.bytes {
            return Err(format!("{bytes} bytes stored, {} counted", self.used_bytes));
        }
        if self.files() > self.bounds.files {
            return Err(format!("{} files", self.files()));
        }
        Ok(())
    }
}
