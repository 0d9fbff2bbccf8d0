//! Whether an image lives in Amazon ECR ([`parse_ecr_image`]: `<account>.dkr.ecr.<region>.<partition
//! suffix>[:port]/repo:tag`, the FIPS `dkr.ecr-fips` hosts and the dual-stack `dkr-ecr` ones, as
//! Amazon's credential helper knows them). Pure and a leaf: the ECR client (`control::aws::ecr`)
//! logs in to the registry it names, and the engine's rules hold an ECR pull of a task with an
//! execution role until the role's credentials are there.

/// Whether `text` can be a region name: lowercase letters, digits and `-`, starting with a
/// letter, at most 32 characters.
pub fn is_region(text: &str) -> bool {
    text.len() <= 32
        && text.starts_with(|first: char| first.is_ascii_lowercase())
        && text
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-')
}

/// The DNS suffixes an ECR registry host ends with after its region.
const REGISTRY_SUFFIXES: &[&str] = &[
    "amazonaws.com",
    "amazonaws.com.cn",
    "amazonaws.eu",
    "on.aws",
    "on.amazonwebservices.com.cn",
    "c2s.ic.gov",
    "sc2s.sgov.gov",
    "cloud.adc-e.uk",
    "csp.hci.ic.gov",
];

/// The ECR registry of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EcrRegistry {
    /// The registry's host as the image names it (`123456789012.dkr.ecr.us-west-2.amazonaws.com`,
    /// with its `:port` when it has one).
    pub host: String,
    /// The registry id: the account's 12 digits.
    pub account: String,
    pub region: String,
    /// A FIPS endpoint (`dkr.ecr-fips`).
    pub fips: bool,
}

/// The ECR registry `image` is in; `None` for an image elsewhere. Pure.
pub fn parse_ecr_image(image: &str) -> Option<EcrRegistry> {
    let (host, _repository) = image.split_once('/')?;
    // A port after the host name is the registry's own business, as Amazon's credential
    // helper reads the host name alone.
    let name = match host.split_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        Some(_) => return None,
        None => host,
    };
    let (account, rest) = name.split_once('.')?;
    if account.len() != 12 || !account.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let rest = rest
        .strip_prefix("dkr.ecr")
        .or_else(|| rest.strip_prefix("dkr-ecr"))?;
    let (fips, rest) = match rest.strip_prefix("-fips") {
        Some(rest) => (true, rest),
        None => (false, rest),
    };
    let (region, suffix) = rest.strip_prefix('.')?.split_once('.')?;
    if !is_region(region) || !REGISTRY_SUFFIXES.contains(&suffix) {
        return None;
    }
    Some(EcrRegistry {
        host: host.to_string(),
        account: account.to_string(),
        region: region.to_string(),
        fips,
    })
}
