//! Which injector each session gets, from `--inject`, `--inject-command` and `--preset`.
use super::args::ScanArgs;
use crate::format::Format;
use crate::inject::{self, Preset, Template};

/// How one session is resumed.
#[derive(Debug, Clone)]
pub(super) enum Inj {
    /// POST to a Lazarus gateway.
    Lazarus { url: String },
    /// Run a command.
    Command(Template),
}

pub(super) struct Injectors {
    lazarus: Option<String>,
    command: Option<Template>,
    presets: Vec<Preset>,
    auto: bool,
}

impl Injectors {
    pub(super) fn from_args(a: &ScanArgs) -> anyhow::Result<Injectors> {
        let lazarus = match a.inject.as_deref() {
            None => None,
            Some("lazarus") => Some(inject::DEFAULT_GATEWAY.to_string()),
            Some(s) => match s.strip_prefix("lazarus=") {
                Some(url) if !url.is_empty() => {
                    inject::parse_url(url)?;
                    Some(url.trim_end_matches('/').to_string())
                }
                _ => anyhow::bail!("bad --inject {s:?}: expected `lazarus` or `lazarus=URL`"),
            },
        };
        let command = a
            .inject_command
            .as_deref()
            .map(Template::parse)
            .transpose()?;
        let auto = lazarus.is_none() && command.is_none() && a.preset.is_empty();
        Ok(Injectors {
            lazarus,
            command,
            presets: a.preset.clone(),
            auto,
        })
    }

    /// With no injector flag, each format gets its natural one: Lazarus the local gateway,
    /// the others their preset.
    pub(super) fn for_format(&self, f: Format) -> Option<Inj> {
        if self.auto {
            return match f {
                Format::Lazarus => Some(Inj::Lazarus {
                    url: inject::DEFAULT_GATEWAY.into(),
                }),
                other => Preset::for_format(other).map(|p| Inj::Command(p.template())),
            };
        }
        if f == Format::Lazarus {
            return self.lazarus.clone().map(|url| Inj::Lazarus { url });
        }
        if let Some(t) = &self.command {
            return Some(Inj::Command(t.clone()));
        }
        self.presets
            .iter()
            .find(|p| p.format() == f)
            .map(|p| Inj::Command(p.template()))
    }
}
