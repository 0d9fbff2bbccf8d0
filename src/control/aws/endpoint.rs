//! Where a service is, as the AWS SDKs decide it: `AWS_ENDPOINT_URL_<SERVICE>` (`STS`, `SSM`,
//! `SECRETS_MANAGER`, `ECR`), else `AWS_ENDPOINT_URL`, else the region's public endpoint
//! (`https://sts.<region>.amazonaws.com`, `ssm.`, `secretsmanager.`, `api.ecr.`; `.com.cn` in
//! the China regions, the isolated partitions' own suffixes). A configured URL keeps the
//! region of the call for signing. Pure; the values come from a lookup (the environment over
//! deckhand's config file, as for every key).

use super::Service;
use crate::control::ecs::Endpoint;

/// The endpoint of `service` for a call in `region`.
pub fn service_endpoint(
    service: Service,
    region: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Endpoint, String> {
    let configured = |name: &str| {
        lookup(name)
            .map(|value| value.trim().to_string())
            .filter(|value| !value.is_empty())
            .map(|value| (name.to_string(), value))
    };
    if let Some((name, url)) =
        configured(service.endpoint_variable()).or_else(|| configured("AWS_ENDPOINT_URL"))
    {
        return Endpoint::parse(&url).map_err(|error| format!("{name}: {error}"));
    }
    if !is_region(region) {
        return Err(format!(
            "{:?} is not an AWS region (letters, digits and '-')",
            crate::text::truncate_chars(region, 64)
        ));
    }
    Endpoint::parse(&format!(
        "https://{}.{region}.{}",
        service.host_prefix(),
        dns_suffix(region)
    ))
}

pub use crate::registry::ecr::is_region;

/// The DNS suffix of a region's partition (the SDKs' partition table).
pub fn dns_suffix(region: &str) -> &'static str {
    const PARTITIONS: &[(&str, &str)] = &[
        ("cn-", "amazonaws.com.cn"),
        ("us-isob-", "sc2s.sgov.gov"),
        ("us-isof-", "csp.hci.ic.gov"),
        ("us-iso-", "c2s.ic.gov"),
        ("eu-isoe-", "cloud.adc-e.uk"),
    ];
    PARTITIONS
        .iter()
        .find(|(prefix, _)| region.starts_with(prefix))
        .map_or("amazonaws.com", |(_, suffix)| suffix)
}
