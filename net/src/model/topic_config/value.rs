//! Kafka's config value types and validators (`ConfigDef` in Apache Kafka), shared by the
//! topic and group config tables: parsing a value as Kafka does and refusing it with the
//! message Kafka gives.

use super::InvalidConfig;

/// A config's value type; [`ValueType::code`] is its DescribeConfigs `config_type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// `true` or `false`, any case.
    Boolean,
    /// Free text (trimmed).
    String,
    /// A 32-bit integer.
    Int,
    /// A 64-bit integer.
    Long,
    /// A floating-point number.
    Double,
    /// A comma-separated list.
    List,
}

impl ValueType {
    /// Kafka's `ConfigType` code: 1 BOOLEAN, 2 STRING, 3 INT, 5 LONG, 6 DOUBLE, 7 LIST.
    pub fn code(self) -> i8 {
        match self {
            ValueType::Boolean => 1,
            ValueType::String => 2,
            ValueType::Int => 3,
            ValueType::Long => 5,
            ValueType::Double => 6,
            ValueType::List => 7,
        }
    }

    fn kafka_name(self) -> &'static str {
        match self {
            ValueType::Boolean => "BOOLEAN",
            ValueType::String => "STRING",
            ValueType::Int => "INT",
            ValueType::Long => "LONG",
            ValueType::Double => "DOUBLE",
            ValueType::List => "LIST",
        }
    }
}

/// What a parsed value must satisfy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// Anything of the right type.
    Any,
    /// A number at least this.
    AtLeast(i64),
    /// A number in this inclusive range.
    Between(i64, i64),
    /// A number in this inclusive range, or exactly the third value (gzip's -1).
    BetweenOr(i64, i64, i64),
    /// A floating-point number in this inclusive range.
    Fraction(f64, f64),
    /// One of these strings (case-sensitive).
    OneOf(&'static [&'static str]),
    /// A list whose items are all among these.
    ListOf(&'static [&'static str]),
    /// `*` or a list of `partition:broker` pairs (the replication throttle lists).
    ThrottledReplicas,
    /// `latest`, `earliest` or `by_duration:<ISO-8601 duration>` (share groups).
    AutoOffsetReset,
}

/// One config of a table: its name, type, Kafka default and validator.
#[derive(Clone, Copy, Debug)]
pub struct ConfigSpec {
    /// The config name.
    pub name: &'static str,
    /// Its value type.
    pub value_type: ValueType,
    /// Apache Kafka's default, as DescribeConfigs prints it.
    pub default: &'static str,
    /// What a value must satisfy.
    pub rule: Rule,
    /// The broker setting whose value is this config's default, if any.
    pub synonym: Option<Synonym>,
}

/// The broker-level setting a config falls back to (shown as a synonym in DescribeConfigs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Synonym {
    /// The broker setting's name, e.g. `log.retention.bytes`.
    pub name: &'static str,
    /// Whether Kafka lists it as a DEFAULT_CONFIG synonym when the broker does not set it
    /// (Kafka leaves out synonyms whose own default is null, such as `log.retention.ms`).
    pub listed_by_default: bool,
}

impl ConfigSpec {
    /// Parses and checks `value`; returns the value as stored (trimmed, as Kafka parses it).
    pub fn check(&self, value: &str) -> Result<String, InvalidConfig> {
        let trimmed = value.trim();
        let invalid = |shown: &str, why: String| {
            InvalidConfig(format!(
                "Invalid value {shown} for configuration {}: {why}",
                self.name
            ))
        };
        let not_a_number = || {
            invalid(
                value,
                format!("Not a number of type {}", self.value_type.kafka_name()),
            )
        };
        match self.value_type {
            ValueType::Boolean => {
                if !trimmed.eq_ignore_ascii_case("true") && !trimmed.eq_ignore_ascii_case("false") {
                    return Err(invalid(
                        value,
                        "Expected value to be either true or false".into(),
                    ));
                }
            }
            ValueType::Int | ValueType::Long => {
                let number: i64 = if self.value_type == ValueType::Int {
                    trimmed.parse::<i32>().map_err(|_| not_a_number())?.into()
                } else {
                    trimmed.parse::<i64>().map_err(|_| not_a_number())?
                };
                check_number(number, self.rule).map_err(|why| invalid(trimmed, why))?;
            }
            ValueType::Double => {
                let number: f64 = trimmed.parse().map_err(|_| not_a_number())?;
                if !number.is_finite() {
                    return Err(not_a_number());
                }
                if let Rule::Fraction(min, max) = self.rule {
                    let shown = java_double(number);
                    if number < min {
                        return Err(invalid(&shown, format!("Value must be at least {min}")));
                    }
                    if number > max {
                        return Err(invalid(&shown, format!("Value must be no more than {max}")));
                    }
                }
            }
            ValueType::String => match self.rule {
                Rule::OneOf(allowed) if !allowed.contains(&trimmed) => {
                    return Err(invalid(
                        trimmed,
                        format!("String must be one of: {}", allowed.join(", ")),
                    ));
                }
                Rule::AutoOffsetReset if !is_auto_offset_reset(trimmed) => {
                    return Err(invalid(
                        trimmed,
                        format!(
                            "Invalid value `{trimmed}` for configuration {}. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
                            self.name
                        ),
                    ));
                }
                _ => {}
            },
            ValueType::List => {
                let items = list_items(trimmed);
                match self.rule {
                    Rule::ListOf(allowed) => {
                        if let Some(bad) = items.iter().find(|item| !allowed.contains(item)) {
                            return Err(invalid(
                                bad,
                                format!("String must be one of: {}", allowed.join(", ")),
                            ));
                        }
                    }
                    Rule::ThrottledReplicas if !is_throttle_list(&items) => {
                        return Err(invalid(
                            &format!("[{}]", items.join(", ")),
                            format!(
                                "{} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
                                self.name
                            ),
                        ));
                    }
                    _ => {}
                }
                return Ok(items.join(","));
            }
        }
        Ok(trimmed.to_string())
    }

    /// The value as a number (for INT and LONG configs whose value was checked).
    pub fn number(value: &str) -> Option<i64> {
        value.trim().parse().ok()
    }
}

/// The items of a LIST value: split on commas, trimmed, an empty value being no items.
pub fn list_items(value: &str) -> Vec<&str> {
    if value.trim().is_empty() {
        Vec::new()
    } else {
        value.split(',').map(str::trim).collect()
    }
}

fn check_number(number: i64, rule: Rule) -> Result<(), String> {
    match rule {
        Rule::AtLeast(min) if number < min => Err(format!("Value must be at least {min}")),
        Rule::Between(min, _) if number < min => Err(format!("Value must be at least {min}")),
        Rule::Between(_, max) if number > max => Err(format!("Value must be no more than {max}")),
        Rule::BetweenOr(min, max, or) if number != or && !(min..=max).contains(&number) => Err(
            format!("Value must be between {min} and {max} or equal to {or}"),
        ),
        _ => Ok(()),
    }
}

fn is_throttle_list(items: &[&str]) -> bool {
    if items == ["*"] {
        return true;
    }
    items.iter().all(|item| {
        item.is_empty()
            || item.split_once(':').is_some_and(|(partition, broker)| {
                is_digits(partition.trim()) && is_digits(broker.trim())
            })
    })
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

fn is_auto_offset_reset(value: &str) -> bool {
    match value {
        "latest" | "earliest" => true,
        other => other
            .strip_prefix("by_duration:")
            .is_some_and(is_iso_duration),
    }
}

/// Java's `Duration.parse` shape: `PnDTnHnMn.nS` (each part optional, at least one given).
fn is_iso_duration(text: &str) -> bool {
    let Some(rest) = text.strip_prefix('P').or_else(|| text.strip_prefix('p')) else {
        return false;
    };
    let (days, time) = match rest.find(['T', 't']) {
        Some(at) => (&rest[..at], Some(&rest[at + 1..])),
        None => (rest, None),
    };
    let mut parts = 0;
    if !days.is_empty() {
        let Some(number) = days.strip_suffix(['D', 'd']) else {
            return false;
        };
        if !is_digits(number.trim_start_matches('-')) {
            return false;
        }
        parts += 1;
    }
    if let Some(mut time) = time {
        if time.is_empty() {
            return false;
        }
        for unit in ['H', 'M', 'S'] {
            if let Some(at) = time.find([unit, unit.to_ascii_lowercase()]) {
                let number = time[..at].trim_start_matches('-');
                let valid = if unit == 'S' {
                    number
                        .split_once('.')
                        .map_or(is_digits(number), |(whole, fraction)| {
                            is_digits(whole)
                                && fraction.len() <= 9
                                && fraction.bytes().all(|b| b.is_ascii_digit())
                        })
                } else {
                    is_digits(number)
                };
                if !valid {
                    return false;
                }
                parts += 1;
                time = &time[at + 1..];
            }
        }
        if !time.is_empty() {
            return false;
        }
    }
    parts > 0
}

/// How Java prints a double (`2.0`, `0.25`), which Kafka's messages show.
fn java_double(number: f64) -> String {
    if number.fract() == 0.0 && number.abs() < 1e7 {
        format!("{number:.1}")
    } else {
        number.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value_type: ValueType, rule: Rule) -> ConfigSpec {
        ConfigSpec {
            name: "x",
            value_type,
            default: "",
            rule,
            synonym: None,
        }
    }

    #[test]
    fn numbers_are_parsed_and_bounded_with_kafkas_messages() {
        let int = spec(ValueType::Int, Rule::AtLeast(4));
        assert_eq!(int.check(" 10 "), Ok("10".into()));
        assert_eq!(
            int.check("3").expect_err("refused").0,
            "Invalid value 3 for configuration x: Value must be at least 4"
        );
        assert_eq!(
            int.check("99999999999").expect_err("refused").0,
            "Invalid value 99999999999 for configuration x: Not a number of type INT"
        );
        assert_eq!(
            spec(ValueType::Long, Rule::Any)
                .check("")
                .expect_err("refused")
                .0,
            "Invalid value  for configuration x: Not a number of type LONG"
        );
        let gzip = spec(ValueType::Int, Rule::BetweenOr(1, 9, -1));
        assert!(gzip.check("-1").is_ok() && gzip.check("9").is_ok());
        assert_eq!(
            gzip.check("10").expect_err("refused").0,
            "Invalid value 10 for configuration x: Value must be between 1 and 9 or equal to -1"
        );
        let zstd = spec(ValueType::Int, Rule::Between(-131_072, 22));
        assert_eq!(
            zstd.check("23").expect_err("refused").0,
            "Invalid value 23 for configuration x: Value must be no more than 22"
        );
        let ratio = spec(ValueType::Double, Rule::Fraction(0.0, 1.0));
        assert!(ratio.check("0.25").is_ok());
        assert_eq!(
            ratio.check("2").expect_err("refused").0,
            "Invalid value 2.0 for configuration x: Value must be no more than 1"
        );
        assert!(ratio.check("NaN").is_err());
    }

    #[test]
    fn strings_booleans_and_lists() {
        let boolean = spec(ValueType::Boolean, Rule::Any);
        assert!(boolean.check("TRUE").is_ok());
        assert_eq!(
            boolean.check("maybe").expect_err("refused").0,
            "Invalid value maybe for configuration x: Expected value to be either true or false"
        );
        let codec = spec(ValueType::String, Rule::OneOf(&["gzip", "producer"]));
        assert!(codec.check("GZIP").is_err());
        assert_eq!(
            codec.check("foo").expect_err("refused").0,
            "Invalid value foo for configuration x: String must be one of: gzip, producer"
        );
        let policy = spec(ValueType::List, Rule::ListOf(&["compact", "delete"]));
        assert_eq!(policy.check("compact, delete"), Ok("compact,delete".into()));
        assert_eq!(policy.check(""), Ok("".into()));
        assert!(policy.check("compact,foo").is_err());
        let throttle = spec(ValueType::List, Rule::ThrottledReplicas);
        assert!(throttle.check("*").is_ok() && throttle.check("0:1, 1:2").is_ok());
        assert_eq!(
            throttle.check("bad").expect_err("refused").0,
            "Invalid value [bad] for configuration x: x must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        );
        let reset = spec(ValueType::String, Rule::AutoOffsetReset);
        for good in [
            "latest",
            "earliest",
            "by_duration:PT1H",
            "by_duration:P1DT2H3M4.5S",
        ] {
            assert!(reset.check(good).is_ok(), "{good}");
        }
        for bad in [
            "foo",
            "by_duration:",
            "by_duration:P",
            "by_duration:PT",
            "by_duration:1H",
        ] {
            assert!(reset.check(bad).is_err(), "{bad}");
        }
    }
}
