//! Traditional Chinese read with the simplified rules: "我會先檢查目前的檔案結構" is
//! the same step as "我会先检查目前的档案结构". Each traditional character maps to its
//! simplified one, and a few words to the mainland word, always to text of the same byte
//! length, so every position the rules find holds in the original text too. Japanese
//! (any kana) is left alone: its kanji are not traditional Chinese ("確認" is its word).

use serde_json::Value;

use crate::ParsedCall;

/// Traditional characters, in code-point order; [`SIMPLIFIED`] holds each one's
/// simplified form at the same index.
const TRADITIONAL: &[&str] = &[
    "丟並乾亂來係個們備傳價儀億儉儘償優儲兒內兩冊凍別剛創劃劇勁動務勝勞勢勵勸匯區協卻",
    "厲參叢吳員問啓啞啟喚單嗎嘆嘗嘯噴嚇嚐嚴囑圍園圓圖團執報場塊塗塵墊壓壞壯壽夠夢夥夾",
    "奪奮妳婦媽孫學實寧審寫寬寶將專尋對導屆層屬島嶺巖帥師帳帶幣幫幹幾庫廟廠廢廣廳張強",
    "彆彈彌彙後徑從復徵愛態慮憂憑憶應懶懷戀戰戲戶拋挾捨掃掛採揀換揮損搖搶擁擇擊擋擔據",
    "擠擬擴擺擾攜攝敗數斬斷於時晝暈暫曆曉曬會東條業極榦構樂樓標樞樣樹橋機檔檢櫃欄權歡",
    "歲歷歸殘殺殼氣決沒況涼淚淨淺減測湯準溝溫滅滾滿漁漢漲潔澤濃濕濟瀏灑灣災為烏無煙煩",
    "熱燈燒爐爭爾牆狀猶獎獨獲獻現瑪環產産畫當療發盡監盤盧眾睜矯確碼礎礙礦祇祢禍禮禱種",
    "稱穀積穩窮竊競筆節範築簡簽籃籤糧紀約紅紙級細紹終組結絕絡給統絲綁經綜綠維網緊線緣",
    "編緩練縣縮總績織繞繩繼續罰羅義習聖聞聯聰聲職聽肅脅腦腳臉臨臺與興舉舊艙艱莊華萬葉",
    "著蓋蓮薦藍藝藥蘆蘇蘋蘭處虛號蝦蟲衆術衛衝衹裏補裝裡製複襯覆見規視親覺覽觀觸訂計訊",
    "討訓託記訪設許訴診註詐評詞詢試詩話該詳誇誌認誕語誠誤說誰課調談請論諮諸諾謀謂謊講",
    "謝證識譜譯議護讀變讓讚豐貓貝負財貢貧貨販貫責貴買貸費貼貿賀資賊賓賞賠賣質賬賴購贈",
    "贊贏趕趙趨跡踐蹤躍車軌軍軟較載輔輕輛輩輪輯輸轉辦辭農這連週進運過達遞遠適遲遷選遺",
    "邁還邊邏郵鄉鄭鄰醫釋針釣鈕鈴銀銷鋪鋼錄錢錯錶鍋鍵鎖鎮鏈鏡鐘鐵鑰長門閃閉開閒間閣閱",
    "闆闊闖關陣陰陳陸陽隊階際隨險隱隻雖雙雜雞離難雲電霧靈靜韓響頁頂項順須預頑頓領頭頻",
    "顆題額顏願類顧顯風飄飛飯飲飾餅養餘館馬駕騎騙騰驅驗驚驟髒體髮鬆鬥鬧魚魯鮮鳥鳳鴨麗",
    "麥麵麼黃點黨齊齒齡龍龜",
];
const SIMPLIFIED: &[&str] = &[
    "丢并干乱来系个们备传价仪亿俭尽偿优储儿内两册冻别刚创划剧劲动务胜劳势励劝汇区协却",
    "厉参丛吴员问启哑启唤单吗叹尝啸喷吓尝严嘱围园圆图团执报场块涂尘垫压坏壮寿够梦伙夹",
    "夺奋你妇妈孙学实宁审写宽宝将专寻对导届层属岛岭岩帅师账带币帮干几库庙厂废广厅张强",
    "别弹弥汇后径从复征爱态虑忧凭忆应懒怀恋战戏户抛挟舍扫挂采拣换挥损摇抢拥择击挡担据",
    "挤拟扩摆扰携摄败数斩断于时昼晕暂历晓晒会东条业极干构乐楼标枢样树桥机档检柜栏权欢",
    "岁历归残杀壳气决没况凉泪净浅减测汤准沟温灭滚满渔汉涨洁泽浓湿济浏洒湾灾为乌无烟烦",
    "热灯烧炉争尔墙状犹奖独获献现玛环产产画当疗发尽监盘卢众睁矫确码础碍矿只你祸礼祷种",
    "称谷积稳穷窃竞笔节范筑简签篮签粮纪约红纸级细绍终组结绝络给统丝绑经综绿维网紧线缘",
    "编缓练县缩总绩织绕绳继续罚罗义习圣闻联聪声职听肃胁脑脚脸临台与兴举旧舱艰庄华万叶",
    "着盖莲荐蓝艺药芦苏苹兰处虚号虾虫众术卫冲只里补装里制复衬复见规视亲觉览观触订计讯",
    "讨训托记访设许诉诊注诈评词询试诗话该详夸志认诞语诚误说谁课调谈请论咨诸诺谋谓谎讲",
    "谢证识谱译议护读变让赞丰猫贝负财贡贫货贩贯责贵买贷费贴贸贺资贼宾赏赔卖质账赖购赠",
    "赞赢赶赵趋迹践踪跃车轨军软较载辅轻辆辈轮辑输转办辞农这连周进运过达递远适迟迁选遗",
    "迈还边逻邮乡郑邻医释针钓钮铃银销铺钢录钱错表锅键锁镇链镜钟铁钥长门闪闭开闲间阁阅",
    "板阔闯关阵阴陈陆阳队阶际随险隐只虽双杂鸡离难云电雾灵静韩响页顶项顺须预顽顿领头频",
    "颗题额颜愿类顾显风飘飞饭饮饰饼养余馆马驾骑骗腾驱验惊骤脏体发松斗闹鱼鲁鲜鸟凤鸭丽",
    "麦面么黄点党齐齿龄龙龟",
];

/// Taiwanese and Hong Kong words for the mainland's, of as many characters.
const WORDS: &[(&str, &str)] = &[
    ("档案", "文件"),
    ("资料夹", "文件夹"),
    ("程式", "程序"),
    ("伺服器", "服务器"),
    ("网路", "网络"),
    ("搜寻", "搜索"),
    ("资讯", "信息"),
    ("讯息", "消息"),
];

fn table() -> &'static [(char, char)] {
    static TABLE: std::sync::LazyLock<Vec<(char, char)>> = std::sync::LazyLock::new(|| {
        TRADITIONAL
            .concat()
            .chars()
            .zip(SIMPLIFIED.concat().chars())
            .collect()
    });
    &TABLE
}

/// The text with its traditional characters simplified, when it has any and no kana.
pub(crate) fn simplified(text: &str) -> Option<String> {
    if text.chars().any(|c| matches!(c, '\u{3040}'..='\u{30ff}')) {
        return None;
    }
    let table = table();
    let mut changed = false;
    let mut out: String = text
        .chars()
        .map(|c| {
            if c < '\u{4e00}' {
                return c;
            }
            match table.binary_search_by_key(&c, |&(t, _)| t) {
                Ok(i) => {
                    changed = true;
                    table[i].1
                }
                Err(_) => c,
            }
        })
        .collect();
    if !changed {
        return None;
    }
    for (word, mainland) in WORDS {
        if out.contains(word) {
            out = out.replace(word, mainland);
        }
    }
    Some(out)
}

/// Arguments read from the simplified text, spelled as the original wrote them: a value
/// found in `simple` is the original's bytes at the same place.
pub(crate) fn restore(original: &str, simple: &str, calls: &mut [ParsedCall]) {
    for c in calls {
        let Some(args) = c.arguments.as_object_mut() else {
            continue;
        };
        for v in args.values_mut() {
            let Value::String(s) = v else { continue };
            if s.is_ascii() {
                continue;
            }
            // (Where the call read it: from its span on, else the last one before it —
            // the same simplified text may stand for two spellings in one answer.)
            let from = crate::harmony::floor(simple, c.span.start.min(simple.len()));
            let at = simple[from..]
                .find(s.as_str())
                .map(|i| from + i)
                .or_else(|| simple[..from].rfind(s.as_str()));
            if let Some(at) = at {
                if let Some(orig) = original.get(at..at + s.len()) {
                    *s = orig.to_string();
                }
            }
        }
    }
}
