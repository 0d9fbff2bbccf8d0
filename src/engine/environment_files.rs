//! `environmentFiles` at create: each file's bytes from the engine's [`EnvironmentFileSource`]
//! (the agent wires the local mirror and S3), read with ECS's rules and merged under the
//! container's `environment` (`task::environment_files`). A file that cannot be had fails the
//! create before Docker is asked, with `ResourceInitializationError` naming its ARN.

use crate::runtime::{CreateContainer, RuntimeError};
use crate::task::environment_files::{
    merge_environment_files, parse_environment_file, parse_s3_arn,
};

/// Where environment files come from. `fetch` gets the ARN and the bucket and key it names, and
/// returns the object's bytes or why they cannot be had.
pub trait EnvironmentFileSource: Send + Sync + std::fmt::Debug {
    fn fetch(&self, arn: &str, bucket: &str, key: &str) -> Result<Vec<u8>, String>;
}

/// Reads every file of `arns` (in order) and merges their variables into `spec.env`.
pub fn add_environment_files(
    source: Option<&dyn EnvironmentFileSource>,
    spec: &mut CreateContainer,
    arns: &[String],
) -> Result<(), RuntimeError> {
    if arns.is_empty() {
        return Ok(());
    }
    let failed = |arn: &str, why: String| RuntimeError::ResourceInitialization {
        message: format!("unable to retrieve environment file {arn}: {why}"),
    };
    let Some(source) = source else {
        return Err(failed(
            arns.first().map(String::as_str).unwrap_or_default(),
            "no environment file source is configured".to_string(),
        ));
    };
    let mut files = Vec::with_capacity(arns.len());
    for arn in arns {
        let object = parse_s3_arn(arn).map_err(|why| failed(arn, why))?;
        let bytes = source
            .fetch(arn, &object.bucket, &object.key)
            .map_err(|why| failed(arn, why))?;
        files.push(parse_environment_file(&bytes).map_err(|why| failed(arn, why))?);
    }
    merge_environment_files(&mut spec.env, &files);
    Ok(())
}
